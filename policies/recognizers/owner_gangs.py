"""`OwnerGangs`: the gangs of recently seen owner objects, remembered across calls.

Every pod of a 64-pod Job asks for the same Job's gang; the decider (the server's
`decision.Memos`) owns one `OwnerGangs` and makes it active for each registry call
(`common.one_call(owners)`), where `common.owner_gangs` asks it.

Pure memory, bounded (a `BoundedMemo`); pickle is used only to fingerprint an object
in memory, never to load anything.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable

from ..memo import BoundedMemo
from ..model import JSON_OBJECT, Gang, KubeObject
from ..settings.config import Config


def _fingerprint(obj: KubeObject) -> bytes | None:
    """The object's whole content as bytes, or None when it cannot be taken.

    pickle keeps every type apart (True, 1 and 1.0; "1" and 1 as keys), so equal
    fingerprints mean equal content as the recognisers read it; it runs in C at a
    few µs for a typical workload, where reading its templates takes ~100 µs.
    """
    try:
        return pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # junk that does not pickle is simply read afresh every time
        return None


class OwnerGangs:
    """The gangs of recently seen owner objects, at most `size` of them.

    Every pod of a 64-pod Job asks for the same Job's gang, and a watch-fed cache
    answers with the same object until it changes. An entry is used only for that
    very object (identity, kept alive by the entry) and the same config:

    - an API object (uid and resourceVersion) at the same resourceVersion: a new
      version, a copy, or a hand-built object with a reused uid is read afresh;
    - any other object (from files, hand-built, no resourceVersion) only while its
      whole content is unchanged (`_fingerprint`), so editing it in place between
      calls is seen; one that cannot be fingerprinted is never remembered.

    Owned by whoever decides (the server's `decision.Memos`) and made active for a
    registry call by `one_call(owners)`; without one, gangs are read afresh.
    """

    def __init__(self, size: int = 4096) -> None:
        self._entries: BoundedMemo[
            tuple[str, str, str, int, int],
            tuple[KubeObject, Config, bytes | None, list[Gang]],
        ] = BoundedMemo(size)

    def get(
        self,
        recognizer: str,
        obj: KubeObject,
        config: Config,
        compute: Callable[[], list[Gang] | None],
    ) -> list[Gang] | None:
        metadata = obj.get("metadata")
        uid = metadata.get("uid") if isinstance(metadata, JSON_OBJECT) else None
        version = metadata.get("resourceVersion") if isinstance(metadata, JSON_OBJECT) else None
        fingerprint: bytes | None = None
        if not (isinstance(uid, str) and uid and isinstance(version, str) and version):
            fingerprint = _fingerprint(obj)
            if fingerprint is None:
                return compute()
            uid = version = ""
        key = (recognizer, uid, version, id(obj), id(config))
        hit = self._entries.get(key)
        # The object and config are kept in the entry, so their ids cannot be reused
        # by others meanwhile.
        if hit is not None and hit[0] is obj and hit[1] is config and hit[2] == fingerprint:
            return list(hit[3])
        gangs = compute()
        if gangs is not None:
            self._entries.put(key, (obj, config, fingerprint, list(gangs)))
        return gangs
