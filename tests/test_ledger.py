"""The ledger counts what emulated device memory is asked to do, hand-counted cases."""
import numpy as np
import pytest

from ncae_cuda.ops.ledger import DeviceNumpy, Ledger, paused, step_begins


def test_operations_allocations_copies_and_syncs_are_counted():
    xp, ledger = DeviceNumpy(), Ledger()
    with ledger.recording():
        a = xp.zeros(4, np.float32)                    # allocation + fill
        b = xp.asarray(np.arange(4, dtype=np.float32)) # allocation + copy from the host
        step_begins()
        c = a + b                                      # op + allocation
        a += b                                         # op, in place
        view = c[1:3].reshape(2, 1)                    # a view: nothing
        s = c.sum()                                    # op + allocation (a 0-d device array)
        value = float(s)                               # copy + sync
        a[:2] = 0                                      # op (a fill)
        a[:] = np.ones(4, np.float32)                  # op + copy from the host
        e = xp.empty_like(a)                           # allocation only
        with paused():
            np.diff(c)                                 # the ledger's own reading: nothing
    setup, step = ledger.steps
    assert setup.ops == ["fill"] and setup.allocations == 2 and setup.copies == 1
    assert step.ops == ["add", "add", "add.reduce", "setitem", "setitem"]
    assert (step.allocations, step.copies, step.syncs) == (3, 2, 1)
    assert value == 6.0 and view.shape == (2, 1) and e.shape == (4,)


def test_summary_reads_the_steps_after_the_first():
    ledger = Ledger()
    with ledger.recording():
        for step in range(3):
            step_begins()
            ledger.op("k")
            ledger.kernel("gather", [4, 4, 1, 1])       # busiest 4 over mean 2.5
            if step == 0:
                ledger.allocation()
            ledger.copy()
        ledger.sync()
    f = ledger.summary()
    assert f["ops_per_step"] == f["ops_per_step_min"] == 2
    assert f["allocations_per_step"] == 0 and f["allocations_first_step"] == 1
    assert f["transfers_per_epoch"] == 2 and f["syncs_per_epoch"] == 1
    assert f["work_balance"] == pytest.approx(1.6) and f["least_balanced_kernel"] == "gather"


def test_no_step_is_an_error():
    with pytest.raises(ValueError, match="no step"):
        Ledger().summary()
