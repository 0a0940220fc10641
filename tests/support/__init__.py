"""Test support, kept out of the production packages: the Fabric test network of a test session
(:mod:`tests.support.fabric`) and the ``KV:*`` probe contract its chaincode services serve beside the
Consortia contracts (:mod:`tests.support.probe_contract`, loaded by the chaincode service as
``tests.support.probe_contract:invoke`` with the repository root on ``PYTHONPATH``)."""
