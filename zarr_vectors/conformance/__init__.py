"""The conformance corpus (docs/conformance.md): its fixtures' generator, and the offline runner.

:mod:`.corpus` loads a corpus and checks its integrity, :mod:`.run` validates and reads
every fixture and compares with its case; :mod:`.generate` rewrites the corpus from
:mod:`.fixtures` (valid stores by our writers), :mod:`.reference` (stores the reference
wrote, kept as data) and :mod:`.mutations` (one raw-file defect each).
"""
