"""The store fuzzer: seeded single mutations of valid stores, judged by an oracle (docs/DESIGN.md, *Store fuzzer*)."""
