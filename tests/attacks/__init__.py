"""The red team of tests/test_attacks.py: attack submissions and what they may plant."""
