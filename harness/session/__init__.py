"""One session on one host: its journal (journal.jsonl, the append-only record every view folds
over), its ledger (a shadow git directory holding one commit per attempt) and the controller."""
