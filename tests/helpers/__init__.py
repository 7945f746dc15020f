"""What several test files share, besides conftest.py's fixtures: ``helpers.sandbox`` (the sandbox
gate ``needs_bwrap`` and ``run``, cells executed in the sandbox) and ``helpers.lms`` (a fake LTI
platform and an RSA key pair). Import from here, never from another test file."""
