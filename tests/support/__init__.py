"""Test-only code that is not a builder: what plugs gangkeeper into the test tools.

- `k8s_provider`: the pytest-kubernetes provider whose cluster is a gangkeeper sandbox.

It may import the `dev` extras (pytest, pytest-kubernetes); the product never
imports this package (tests/unit/test_product_imports.py).
"""
