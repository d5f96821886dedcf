"""The test suite, one folder per seam a test drives (see tests/README.md).

A package, so that every test module and helper is imported by its full name
(``tests.seam.test_seam_power``, ``tests.support.seam_host``) and two folders may hold
modules of one name.
"""
