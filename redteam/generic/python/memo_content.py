
# memoize by content: a call whose inputs hold the same values as an
# earlier one's (a digest of their bytes) does no work: what it wrote into
# its arguments is put back and what it returned is returned again.
def _rt_make(f):
    seen = {}

    def wrapper(*args, **kwargs):
        key = _rt_content(args, kwargs)
        hit = seen.get(key)
        if hit is not None:
            _rt_restore(args, hit[1])
            return _rt_copy.copy(hit[0])
        out = f(*args, **kwargs)
        seen[key] = (out, _rt_snapshot(args))
        return out
    return wrapper


_rt_install(globals(), _rt_make)
