"""The Fabric host: a Gateway client implementing ``ledger.interface.Ledger``
(:class:`ledger.fabric.gateway.FabricLedger`) and the Python chaincode service
(:mod:`ledger.fabric.chaincode_server`). The native network that runs them is the top-level package
:mod:`network` (``network.connect()`` for applications). See docs/fabric.md."""
