"""A round's files in the artifact stores, as the node agent reads and writes them (docs/executor.md
"Artifact store and messages"; seed 003 §IV-B/C).

Inputs of round r: the organisation's previous state (its own store, the digest from its completed
record of round r-1) and each message addressed to it in round r-1 (the sender's store, located
through the sender's message index, verified against the digest the sender's task signed, opened
with the organisation's key-agreement key). Outputs: the new state and the model sealed to the
organisation itself, each outgoing message sealed to its recipient and indexed.
"""

from __future__ import annotations

from pathlib import Path

from executor import message_index
from executor.artifact_client import ArtifactPeers
from executor.artifact_tls import ClientTLS
from executor.artifacts import ArtifactStore, open_message
from executor.errors import ExecutorError
from executor.membership import MemberEndpoints
from executor.tasks import TaskOutputs
from ledger.client import ConsortiaClient, ProcessRecord
from ledger.identity import Consortium


class RoundFiles:
    """One organisation's view of the round files (its store, and the other members' stores)."""

    def __init__(
        self,
        client: ConsortiaClient,
        store: ArtifactStore,
        store_root: Path,
        consortium: Consortium,
        peers: ArtifactPeers | None = None,
    ):
        # the senders' artifact services, if they serve over https: found on the ledger (membership)
        self.peers = peers or ArtifactPeers(ClientTLS(consortium, client.organisation))
        if self.peers.members is None:
            self.peers.members = MemberEndpoints(client, consortium)
        self.client = client
        self.store = store
        self.store_root = Path(store_root)
        self.consortium = consortium
        self.org = client.organisation

    def gather_inputs(self, process: ProcessRecord, rnd: int) -> tuple[bytes | None, dict[str, bytes]]:
        """(previous state, inbox) of round ``rnd``: the state from this organisation's own store (digest
        from its completed record of round r-1), each message addressed to it in round r-1 from the
        sender's store, checked against the sender's signed digest and opened."""
        if rnd == 1:
            return None, {}
        pid = process.id
        # one small query for every member's part of round r-1 (its status, state digest and messages
        # to this organisation; not the records, not one evaluation per sender)
        previous = {e.organisation: e for e in self.client.round_inbox(pid, rnd - 1)}
        own = previous.get(self.org)
        if own is None or own.status != "completed" or own.state is None:
            raise ExecutorError(f"no completed own record for round {rnd - 1}")
        key = self.consortium.encryption_key(self.org)
        state = self.store.get_private(own.state, key)
        inbox: dict[str, bytes] = {}
        for sender in process.consortium:
            if sender == self.org:
                continue
            rec = previous.get(sender)
            if rec is None or rec.status != "completed":
                raise ExecutorError(f"round {rnd - 1} of {sender} is not completed")
            for m in rec.messages:
                # a store root shared with the sender (one machine) indexes the message: read it there;
                # otherwise ask the sender's artifact service, found on the ledger (docs/artifacts.md)
                local = message_index.read_entry(self.store_root, sender, pid, rnd - 1, self.org)
                remote = None
                if local is None:
                    remote = self.peers.fetch_message(sender, pid, rnd - 1, m.digest, self.store)
                ref = remote or message_index.locate(
                    self.store_root, sender, pid, rnd - 1, self.org, m.digest, entry=local
                )
                inbox[sender] = open_message(
                    ref, process_id=pid, round=rnd - 1, recipient=self.org, recipient_key=key
                )
        return state, inbox

    def store_outputs(self, pid: str, rnd: int, outputs: TaskOutputs) -> None:
        """Store a completed task's new state and model sealed to this organisation (never in the clear
        at rest), and each outgoing message sealed to its recipient and indexed for it."""
        own = self.consortium.encryption_certificate(self.org)
        self.store.put_private(outputs.state, own)
        for recipient, payload in sorted(outputs.outbox.items()):
            ref = self.store.put_message(
                payload,
                process_id=pid,
                round=rnd,
                recipient=recipient,
                recipient_certificate=self.consortium.encryption_certificate(recipient),
            )
            message_index.write_entry(self.store_root, pid, rnd, ref)
        if outputs.model is not None:
            self.store.put_private(outputs.model, own)
