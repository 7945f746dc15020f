"""The red team of tests/course/test_attacks.py: attack submissions and what they may plant."""
