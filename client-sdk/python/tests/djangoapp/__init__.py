"""A Django app of the tests: the order service's model."""
