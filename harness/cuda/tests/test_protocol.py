import os
import unittest

import _paths  # noqa: F401
from gadfly_cuda import protocol


class ProtocolTest(unittest.TestCase):
    def test_round_trip_timeout_and_eof(self):
        r, w = os.pipe()
        try:
            msg = {"op": "call", "nonce": "ab", "args": [{"t": "int", "v": 3}], "x": 1.5}
            protocol.send(w, msg)
            protocol.send(w, {"op": "exit"})
            self.assertEqual(protocol.recv(r, timeout=1), msg)
            self.assertEqual(protocol.recv(r, timeout=1), {"op": "exit"})
            with self.assertRaises(TimeoutError):
                protocol.recv(r, timeout=0.05)
            os.write(w, b"\x05\x00\x00\x00{")
            os.close(w)
            w = None
            with self.assertRaises(EOFError):
                protocol.recv(r, timeout=1)
        finally:
            os.close(r)
            if w is not None:
                os.close(w)

    def test_oversize_is_refused(self):
        r, w = os.pipe()
        try:
            os.write(w, (protocol.MAX_MESSAGE + 1).to_bytes(4, "little"))
            with self.assertRaises(protocol.ProtocolError):
                protocol.recv(r, timeout=1)
        finally:
            os.close(r)
            os.close(w)


if __name__ == "__main__":
    unittest.main()
