"""Operations tooling: a stack on this machine and what runs against one.

- :mod:`~clients.ops.stack`: Redis, the API and pinned workers as child processes
  (``fbgp-al up``, the reliability tests, the soak test);
- :mod:`~clients.ops.http_demo`: the demo campaign of ``fbgp-al up --demo``;
- :mod:`~clients.ops.simulate`: ``fbgp-al simulate``, a built-in simulator as a remote labeler;
- :mod:`~clients.ops.logs`: the stack's log files, one per part, rotated by size;
- :mod:`~clients.ops.soak`: ``fbgp-al soak``, labeling while processes are killed;
- :mod:`~clients.ops.churn`: ``fbgp-al soak --churn``, what a campaign keeps per ended ticket;
- :mod:`~clients.ops.service_benchmark`: ``fbgp-al bench-service``, the loop's latencies.
"""


def described(doc: str | None) -> str:
    """A command's ``--help`` description: its module docstring's first paragraph, whole, as
    plain text (reST's double backquotes dropped)."""
    first = (doc or "").strip().split("\n\n")[0]
    return " ".join(first.replace("``", "").split())
