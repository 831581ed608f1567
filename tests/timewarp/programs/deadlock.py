"""Parent and child each wait forever for a message from the other over a pipe."""

import os

a_read, a_write = os.pipe()
b_read, b_write = os.pipe()
if os.fork() == 0:
    os.read(a_read, 1)  # never written
    os._exit(0)
os.read(b_read, 1)  # never written
