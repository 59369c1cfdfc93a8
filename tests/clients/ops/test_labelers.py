"""The ledger of the labels the service acknowledged to the soak's simulators
(:mod:`clients.ops.labelers`): each ticket's first acknowledged label is the one kept, a repeat
acknowledged by a 200 is counted apart, and it stays right when many threads write at once."""

import threading

from fbgp_al.clients.ops.labelers import Ledger


def test_a_tickets_first_acknowledged_label_is_kept_and_repeats_are_counted():
    ledger = Ledger()
    ledger.ack("a", "t1", 0.5, created=True)
    ledger.ack("a", "t1", 0.9, created=False)  # the same ticket again: the first y stays
    ledger.ack("a", "t2", 0.7, created=False)  # first seen as a 200: its first answer was lost
    ledger.ack("b", "t1", 1.5, created=True)
    assert ledger.of("a") == {"t1": 0.5, "t2": 0.7} and ledger.of("b") == {"t1": 1.5}
    assert ledger.of("c") == {} and ledger.count() == 3 and ledger.repeats == 1
    ledger.reject(409)
    ledger.reject(409)
    ledger.error("timeout")
    ledger.give_up()
    assert ledger.rejected == {"409": 2} and ledger.errors == {"timeout": 1}
    assert ledger.unanswered == 1 and ledger.last_ack > 0


def test_the_ledger_counts_every_label_of_many_threads():
    ledger = Ledger()

    def simulator(k: int) -> None:
        for i in range(500):
            ledger.ack(f"c{k % 2}", f"{k}-{i}", float(i), created=True)

    threads = [threading.Thread(target=simulator, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert ledger.count() == 8 * 500 and len(ledger.of("c0")) == 4 * 500
