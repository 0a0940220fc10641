"""The Fabric host: a Gateway client implementing ``ledger.interface.Ledger``
(:class:`ledger.fabric.gateway.FabricLedger`), the Python chaincode service
(:mod:`ledger.fabric.chaincode_server`) and a native network (:mod:`ledger.fabric.network`,
``ledger.fabric.network.connect()`` for applications). See docs/fabric.md."""
