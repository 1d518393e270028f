"""The job one submission describes, parsed once into typed values that keep their pointer and source.

``spec`` declares the job (training, serving, the quoted cluster, measurements), ``parse`` builds it from a
validated submission, ``given`` is one value with its provenance, and ``pointers`` names where the members
sit in the submission.
"""
