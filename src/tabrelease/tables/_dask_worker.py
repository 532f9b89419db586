"""Loaded by each worker of the local Dask cluster as it starts (its `preload`): the worker ignores SIGINT. A Ctrl-C
reaches the whole process group, and each worker had printed its own KeyboardInterrupt traceback under the
command's one line (a new user's trial); the command that started the cluster takes the interrupt and closes it."""

import signal
import threading

if threading.current_thread() is threading.main_thread():
    signal.signal(signal.SIGINT, signal.SIG_IGN)
