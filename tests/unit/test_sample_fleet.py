"""The sample fleet exists twice, as real files: `examples/fleet.yaml` for people and the
tests that feed the examples through the policy, and `webhook/sandbox/data/fleet.yaml`
for the package (`gangkeeper serve` without `--nodes`, `gangkeeper sandbox`).

A symlink between them would dangle in the wheel the image builds from the package
folders alone, so they are copies, and this test fails when they differ.
"""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "fleet.yaml"
PACKAGED = REPO / "webhook" / "sandbox" / "data" / "fleet.yaml"


def test_the_packaged_sample_fleet_is_a_real_file_equal_to_the_example() -> None:
    assert not PACKAGED.is_symlink(), f"{PACKAGED.relative_to(REPO)} must be a real file"
    assert not EXAMPLE.is_symlink(), f"{EXAMPLE.relative_to(REPO)} must be a real file"
    assert PACKAGED.read_bytes() == EXAMPLE.read_bytes(), (
        f"{PACKAGED.relative_to(REPO)} differs from {EXAMPLE.relative_to(REPO)}: "
        f"copy one onto the other (cp {EXAMPLE.relative_to(REPO)} {PACKAGED.relative_to(REPO)})"
    )
