"""The untrusted submission: its kernel in bubblewrap (:mod:`.bubblewrap`), nbgrader's execute step
that starts it there (:mod:`.execute`), and per-notebook limits (:mod:`.cgroup`)."""
