"""The worker nodes of a multi-node run (`nodes:` in the spec; `host` is the head, where the run
is launched). Each node has its own reconnecting link, made with the session's clock and sleep
like the head's, but with a short grace (`connection.node_grace`): a node out of reach for longer
is lost — the attempt fails as an infrastructure failure that names it (a line the harness adds
to the run's log, which the base playbook's `harness_node_lost` reads), and the node is left
alone until the next attempt.

    links = [NodeLink(node, Reconnecting(t, reopen, grace=…)) for node, t, reopen in opened]
    problems = await cleanup_nodes(links, spec.cleanup)   # every node; the head is the launcher's
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import HostUnreachable, one_line

LOST = "harness: node {label} ({host}) lost: {why}"  # the line `harness_node_lost` (base.yaml) matches


@dataclass
class NodeLink:
    node: object  # spec.Node
    t: object  # a Reconnecting transport
    workdir: str
    lost: str = ""  # why the node was given up on in this attempt ("" while it answers)

    @property
    def label(self) -> str:
        return self.node.label

    def lose(self, exc: BaseException) -> bytes:
        """Give the node up for this attempt; the log line that says so."""
        self.lost = one_line(exc)
        return (LOST.format(label=self.label, host=self.node.host, why=self.lost) + "\n").encode()


def links(spec, opened, *, clock, sleep, on_change=None) -> list[NodeLink]:
    """`opened`: (node, transport, reopen) for each node of the spec, in its order."""
    from ..remote.reconnect import Reconnecting

    out = []
    for node, t, reopen in opened:
        def changed(what, _label=node.label, **kw):
            if on_change:
                on_change(_label, what, **kw)
        link = Reconnecting(t, reopen, clock=clock, sleep=sleep, grace=spec.connection.node_grace,
                            on_change=changed)
        out.append(NodeLink(node, link, node.workdir or spec.workdir))
    return out


def answering(nodes: list[NodeLink]) -> list[NodeLink]:
    return [n for n in nodes if not n.lost]


async def cleanup_nodes(nodes: list[NodeLink], commands: list[str]) -> list[str]:
    """Run the spec's cleanup commands on every node still answering, in its workdir; what went
    wrong, one line each. Cleanup commands are meant to be safe to repeat (`ray stop --force`):
    a reconnection runs one again."""
    problems = []
    for n in answering(nodes):
        for c in commands:
            try:
                r = await n.t.run(c, cwd=n.workdir, timeout=120)
            except HostUnreachable as e:
                n.lost = one_line(e)
                problems.append(f"node {n.label}: unreachable, not cleaned up ({n.lost[:120]})")
                break
            if not r.ok:
                problems.append(f"node {n.label}: `{c}` failed (exit {'timeout' if r.timed_out else r.returncode}): "
                                f"{r.tail(1)[:160]}")
    return problems


def reset(nodes: list[NodeLink]) -> None:
    """A new attempt: every node is tried again."""
    for n in nodes:
        n.lost = ""
