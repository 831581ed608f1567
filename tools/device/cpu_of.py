"""CPU seconds (user + system, all threads) of each process given, from /proc:
`cpu_of.py PID...`."""
import os
import sys

tick = os.sysconf("SC_CLK_TCK")
for pid in sys.argv[1:]:
    try:
        f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        name = open(f"/proc/{pid}/comm").read().strip()
        print(pid, name, round((int(f[11]) + int(f[12])) / tick, 2))
    except OSError:
        print(pid, "gone")
