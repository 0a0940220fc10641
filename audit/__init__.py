"""Audit: everything that checks what the ledger and the artifact stores say, without trusting the
agents that wrote them.

* :mod:`audit.report` -- the one report type (:class:`~audit.report.Report` of
  :class:`~audit.report.Check`);
* :mod:`audit.signatures` -- the one record-signature check and the certificate-issuance check;
* :mod:`audit.lineage` -- the one lineage rule and the checks of a lineage's records;
* :mod:`audit.artifacts` -- the checks of a lineage's artifacts in the organisations' stores;
* :mod:`audit.verification` -- a model verified against the ledger (and the audit index, the stores);
* :mod:`audit.ledger_file` -- the full verification of an embedded ledger file;
* :mod:`audit.checkpoints` -- the verification of signed chain-head checkpoints;
* :mod:`audit.attestations` -- in-toto/DSSE attestations of execution records;
* :mod:`audit.bundles` -- offline audit bundles: export, and verify with no ledger;
* :mod:`audit.write_sets` -- proofs that a bundle's records are the values their blocks wrote.
"""
