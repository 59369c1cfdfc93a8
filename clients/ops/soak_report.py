"""What ``fbgp-al soak`` (:mod:`clients.ops.soak`) and its adversarial and churn runs report: the
acknowledged labels of a campaign against the stored ones (:func:`check_labels`), the summary
printed at the end, and whether the run failed."""

from __future__ import annotations

from collections import Counter

from fbgp_al.clients.client import FbgpClient
from fbgp_al.clients.ops.stack import LocalStack
from fbgp_al.service.store import CampaignStore

# seconds after the refits end before Redis's memory is read again: a read result lives 5 s,
# an unread one 60
MEMORY_SETTLE = 70.0


def check_labels(
    stack: LocalStack, api: FbgpClient, campaign: str, acked: dict[str, float]
) -> dict:
    """Compare the acknowledged labels of ``campaign`` with the stored ones."""
    stored = [
        label
        for label in CampaignStore(stack.client()).labels.all(campaign)
        if label.get("ticket") is not None
    ]
    by_ticket = {label["ticket"]: label["y"] for label in stored}
    lost = [t for t, y in acked.items() if t not in by_ticket or by_ticket[t] != y]
    extra = [t for t in by_ticket if t not in acked]
    observed = Counter(api.observations(campaign).y)
    missing_y = Counter(acked.values()) - observed
    return {
        "acknowledged": len(acked),
        "stored": len(stored),
        "lost": len(lost),
        "lost_y": sum(missing_y.values()),
        "extra": len(extra),
        "observations": sum(observed.values()),
    }


def summary(report: dict) -> str:
    lines = [
        f"soak: {report['seconds']:g} s, {report['campaigns']} campaigns, "
        f"{report['simulators']} simulators, {report['workers']} workers",
        f"labels: {report['labels_acknowledged']} acknowledged, {report['labels_stored']} "
        f"stored, {report['lost']} lost, {report['extra']} extra (stored, never acknowledged)",
        f"faults: {len(report['faults'])}, {report['unrecovered']} not recovered",
    ]
    for f in report["faults"]:
        took = f["recovery_seconds"]
        lines.append(
            f"  {f['at']:6.1f} s  {f['kind']:6s}  "
            + ("not recovered" if took is None else f"recovered in {took:.1f} s")
        )
    for r in report["campaign_details"]:
        lines.append(
            f"  campaign {r['id']} {r['mode']:10s} {r['n_labeled']:3d}/"
            f"{r['max_labels']} labels, model {r['model_version']}, {r['state']}, "
            + ("stuck" if r["stuck"] else "progressing" if r["progressing"] else "idle")
        )
    lines.append(f"stuck campaigns: {report['stuck']}")
    if "redis_memory" in report:
        m = report["redis_memory"]
        lines.append(
            f"Redis: {m['start']['mb']} MB at the start, peak {m['settled']['peak_mb']} MB, "
            f"{m['refits_ended']['mb']} MB as the refits ended ({m['refits_ended']['jobs']} job "
            f"records), {m['settled']['mb']} MB {MEMORY_SETTLE:.0f} s later "
            f"({m['settled']['jobs']} job records)"
        )
    return "\n".join(lines)


def failed(report: dict) -> bool:
    return bool(report["lost"] or report["lost_y"] or report["stuck"] or report["unrecovered"])
