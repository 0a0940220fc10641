"""Artifact exchange: how payloads live off chain and cross between organisations (docs/artifacts.md).

The layer between ``ledger`` (records, identity) and ``executor`` (the node agent), used by both the
executor and the API:

* :mod:`exchange.store` -- each organisation's content-addressed store (every read re-hashed; states and
  models sealed to their owner; messages sealed to their recipient);
* :mod:`exchange.sealing` -- sealing to an organisation (HPKE, RFC 9180) and data-key encryption;
  :mod:`exchange.model_seal` -- how a published model and its data keys are bound to the model;
* :mod:`exchange.messages` -- the message index (where a sender's sealed message for one recipient lies);
* :mod:`exchange.rounds` -- a round's files: a task's inputs gathered and its outputs stored, one call each
  for the node agent;
* :mod:`exchange.service` -- an organisation serving its own store (HTTPS, or in memory to the nodes this
  process hosts), under :mod:`exchange.readers`' rule, with :mod:`exchange.tls`' mutual TLS;
* :mod:`exchange.client` -- fetching from another organisation's service (httpx);
* :mod:`exchange.locations` -- the one resolver from an organisation to where it serves, given to the
  store: no store ever opens another organisation's files;
* :mod:`exchange.files` -- private files (0600 / 0700, atomic); :mod:`exchange.errors` -- typed errors.
"""
