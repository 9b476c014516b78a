"""Started with this folder on PYTHONPATH, a Python process has a second
thread from its first moment (Python imports `sitecustomize` at start-up),
as a process whose start-up hooks start one does: the kernel then refuses
it a new user namespace (unshare: EINVAL), the refusal
`private_network.Entry` must survive (tests/test_supervision.py)."""

import threading
import time

threading.Thread(target=time.sleep, args=(3600,), daemon=True).start()
