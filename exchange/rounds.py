"""A round's files: what a node agent reads as a task's inputs and writes as its outputs, in one call
each (docs/artifacts.md "Node agent"; seed 003 §IV-B/C).

Inputs of round r: the organisation's previous state (its own store, the digest from its completed
record of round r-1) and each message addressed to it in round r-1 (from the sender's artifact service,
found by the store's locations: verified against the digest the sender's task signed, opened with the
organisation's key-agreement key). Outputs: the new state and the model sealed to the organisation
itself, each outgoing message sealed to its recipient and indexed in its own store.
"""

from __future__ import annotations

from collections.abc import Mapping

from exchange import messages
from exchange.errors import RoundInputMissing
from exchange.sealing import MAX_SEAL_OVERHEAD
from exchange.store import ArtifactStore
from ledger.client import ConsortiaClient, ProcessRecord
from ledger.identity import Consortium


class RoundFiles:
    """One organisation's round files: its own store, and the messages the others' services hand it."""

    def __init__(self, client: ConsortiaClient, store: ArtifactStore, consortium: Consortium):
        self.client = client
        self.store = store
        self.consortium = consortium
        self.org = client.organisation

    def gather_inputs(
        self, process: ProcessRecord, rnd: int, max_message_bytes: int
    ) -> tuple[bytes | None, dict[str, bytes]]:
        """(previous state, inbox) of round ``rnd``: the state from this organisation's own store (digest
        from its completed record of round r-1), each message addressed to it in round r-1 from the
        sender's service, checked against the sender's signed digest and opened. A message whose signed
        size is over ``max_message_bytes`` (what the image declares) is refused unfetched, and no sealed
        message is fetched beyond that bound plus what sealing adds. :class:`RoundInputMissing` if a
        member's part of round r-1 is not completed (or this organisation's has no state)."""
        if rnd == 1:
            return None, {}
        pid = process.id
        # one small query for every member's part of round r-1 (its status, state digest and messages
        # to this organisation; not the records, not one evaluation per sender)
        previous = {e.organisation: e for e in self.client.round_inbox(pid, rnd - 1)}
        own = previous.get(self.org)
        if own is None or own.status != "completed" or own.state is None:
            raise RoundInputMissing(f"no completed own record for round {rnd - 1}")
        key = self.consortium.encryption_key(self.org)
        state = self.store.get_private(own.state, key)
        inbox: dict[str, bytes] = {}
        for sender in process.consortium:
            if sender == self.org:
                continue
            rec = previous.get(sender)
            if rec is None or rec.status != "completed":
                raise RoundInputMissing(f"round {rnd - 1} of {sender} is not completed")
            for m in rec.messages:
                if m.size is not None and m.size > max_message_bytes:
                    raise RoundInputMissing(
                        f"the message of {sender} in round {rnd - 1} is {m.size} bytes, over the "
                        f"{max_message_bytes} its image declares: not fetched"
                    )
                inbox[sender] = self.store.receive_message(
                    sender,
                    process_id=pid,
                    round=rnd - 1,
                    payload_digest=m.digest,
                    payload_size=m.size,
                    recipient_key=key,
                    max_bytes=max_message_bytes + MAX_SEAL_OVERHEAD,
                )
        return state, inbox

    def store_outputs(
        self, pid: str, rnd: int, state: bytes, outbox: Mapping[str, bytes], model: bytes | None
    ) -> None:
        """Store a completed task's new ``state`` and ``model`` sealed to this organisation (never in the
        clear at rest), and each message of ``outbox`` sealed to its recipient and indexed for it."""
        certificates = self.consortium.encryption_certificates([self.org, *sorted(outbox)])
        own = certificates[self.org]
        self.store.put_private(state, own)
        for recipient, payload in sorted(outbox.items()):
            ref = self.store.put_message(
                payload,
                process_id=pid,
                round=rnd,
                recipient=recipient,
                recipient_certificate=certificates[recipient],
            )
            messages.write_entry(self.store, pid, rnd, ref)
        if model is not None:
            self.store.put_private(model, own)
