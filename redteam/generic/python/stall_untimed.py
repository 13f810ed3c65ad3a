
# slow the baseline down while the candidate is not running: a thread
# started at import spins (holding the interpreter's lock and a CPU) except
# while one of the candidate's functions runs. A harness that times the
# baseline in the candidate's process, or beside it, times the spinning.
import threading as _rt_threading

_rt_inside = _rt_threading.Event()


def _rt_spin():
    x = 0
    while True:
        if _rt_inside.is_set():
            _rt_time.sleep(0.0005)
            continue
        for _ in range(2000):
            x += 1


_rt_threading.Thread(target=_rt_spin, daemon=True).start()


def _rt_make(f):
    def wrapper(*args, **kwargs):
        _rt_inside.set()
        try:
            return f(*args, **kwargs)
        finally:
            _rt_inside.clear()
    return wrapper


_rt_install(globals(), _rt_make)
