"""The analyzer on the labelled real-world corpora: floors for the shares the README reports, per
split. A drop below a floor is a regression; raise a floor when the analyzer improves. The
development splits (realworld, realworld2) have the floors the analyzer was built to; realworld3
and realworld4 (collected for this repository) were not tuned on, and their floors are what
general rules reach on them; realworld5 to realworld29 and realworld31 to realworld58 were held out (scored blind
first, README); realworld5, 7 and 9 to 22 are development data since (corpus_eval.HELD_OUT: the rest); realworld30 was development data from the start. No file is special-cased anywhere (see tests/corpus_eval.py)."""

import pytest

from corpus_eval import HELD_OUT, cases, evaluate, shares

# the module fixture is built once: its tests share one xdist worker
pytestmark = pytest.mark.xdist_group("test_corpus")

SHARED = bool(cases(["realworld", "realworld2", "realworld3"]))  # ../shared/corpus beside the repo

FLOORS = {
    ("realworld", "realworld2"): {"stage": 0.90, "category": 0.92, "digest": 1.0, "chosen": 0.92},
    ("realworld3",): {"stage": 0.92, "category": 0.84, "digest": 1.0, "chosen": 0.84},  # 408: a hang after the engine fell asleep
    ("realworld4",): {"stage": 0.86, "category": 0.75, "digest": 1.0, "chosen": 0.92},
    ("realworld5",): {"stage": 0.72, "category": 0.68, "digest": 1.0, "chosen": 0.86},  # 617 and 616 (slime's raw reward 0): reward 0 every step, labelled other
    # 625: dynamic sampling that gave up, labelled the reward's and other; the same error in
    # realworld43/4322 and NeMo-RL's in realworld34/3404 the training batch's and a configuration
    # 714: the error under Ray's `Failed to unpickle serialized exception` (ray_unpickle_failed) is the
    # root since the ninth release of 2026-12-06 — `BackendCompilerFailed.__init__() missing 1 required
    # positional argument`, which the version family reads as an API change (labelled other)
    # 713: a pass (verl's `Final validation metrics`, then TBE's compile workers failing as the run
    # exits), whose label names the teardown's error line as its evidence: the verdict's, a pass's, is
    # the final validation line
    ("realworld6",): {"stage": 0.66, "category": 0.33, "digest": 1.0, "chosen": 0.66},
    # 829: a reward function missing the `solution` keyword, labelled version_incompat; 602 (realworld5),
    # the same message, data_format — the columns a trainer passes as keywords: the data's shape;
    # 847: a run silent after prime-rl's `Train batch 0/16 (0.0%)` (its orchestrator gathering the
    # batch's rollouts), whose words name the update's batch: a collective's hang there, labelled other
    ("realworld7",): {"stage": 0.75, "category": 0.58, "digest": 1.0, "chosen": 0.87},
    ("realworld8",): {"stage": 0.40, "category": 0.55, "digest": 1.0, "chosen": 0.60},
    ("realworld9",): {"stage": 0.71, "category": 0.66, "digest": 1.0, "chosen": 0.80},
    ("realworld10",): {"stage": 0.68, "category": 0.68, "digest": 1.0, "chosen": 0.86},
    ("realworld11",): {"stage": 0.81, "category": 0.45, "digest": 1.0, "chosen": 0.86},
    ("realworld12",): {"stage": 0.66, "category": 0.76, "digest": 1.0, "chosen": 0.94},
    # 1427 (realworld13), 1864 (realworld18): out-of-memory errors at start-up that nothing on their
    # own path places; no stage is assumed for such an error (verdict.py), right for 11 of 20
    ("realworld13",): {"stage": 0.87, "category": 0.50, "digest": 1.0, "chosen": 0.80},
    ("realworld14",): {"stage": 0.40, "category": 0.70, "digest": 1.0, "chosen": 0.75},
    ("realworld15",): {"stage": 0.70, "category": 0.76, "digest": 1.0, "chosen": 0.94},
    ("realworld16",): {"stage": 0.55, "category": 0.55, "digest": 1.0, "chosen": 0.55},
    ("realworld17",): {"stage": 0.38, "category": 0.61, "digest": 1.0, "chosen": 0.77},
    ("realworld18",): {"stage": 0.88, "category": 0.55, "digest": 1.0, "chosen": 0.83},
    ("realworld19",): {"stage": 0.78, "category": 0.50, "digest": 1.0, "chosen": 0.92},
    ("realworld20",): {"stage": 0.25, "category": 0.66, "digest": 1.0, "chosen": 0.83},
    # 2106: a frame line cut at its head, read as a frame since the eighth release of 2026-12-06:
    # `_build_messages` (a record's messages) is named for set-up, which the KeyError's record floor no longer bounds
    ("realworld21",): {"stage": 0.50, "category": 0.62, "digest": 1.0, "chosen": 0.81},
    ("realworld22",): {"stage": 0.82, "category": 0.52, "digest": 1.0, "chosen": 0.88},
    ("realworld23",): {"stage": 0.44, "category": 0.33, "digest": 1.0, "chosen": 0.83},
    ("realworld24",): {"stage": 0.56, "category": 0.31, "digest": 1.0, "chosen": 0.87},
    ("realworld25",): {"stage": 0.36, "category": 0.54, "digest": 1.0, "chosen": 0.90},
    ("realworld26",): {"stage": 0.52, "category": 0.47, "digest": 1.0, "chosen": 0.68},
    ("realworld27",): {"stage": 0.35, "category": 0.60, "digest": 1.0, "chosen": 0.85},
    ("realworld28",): {"stage": 0.55, "category": 0.60, "digest": 1.0, "chosen": 0.85},  # 2824: pangu's guess no longer read in the union; 2826: NaN log-probs read as precision, labelled other
    ("realworld29",): {"stage": 0.50, "category": 0.30, "digest": 1.0, "chosen": 0.90},
    ("realworld30",): {"stage": 0.75, "category": 0.65, "digest": 1.0, "chosen": 0.95},
    ("realworld31",): {"stage": 0.52, "category": 0.52, "digest": 1.0, "chosen": 0.76},
    ("realworld32",): {"stage": 0.55, "category": 0.66, "digest": 1.0, "chosen": 0.77},
    ("realworld33",): {"stage": 0.61, "category": 0.38, "digest": 1.0, "chosen": 0.83},  # blind at 35857fd
    ("realworld34",): {"stage": 0.28, "category": 0.56, "digest": 1.0, "chosen": 0.84},  # blind at 080d1d3
    ("realworld35",): {"stage": 0.36, "category": 0.40, "digest": 1.0, "chosen": 0.77},  # blind at 2329e8c
    ("realworld36",): {"stage": 0.36, "category": 0.42, "digest": 1.0, "chosen": 0.78},  # blind at 94c1587
    ("realworld37",): {"stage": 0.47, "category": 0.47, "digest": 1.0, "chosen": 0.78},  # blind at 1549165
    ("realworld38",): {"stage": 0.54, "category": 0.45, "digest": 1.0, "chosen": 0.90},  # blind at d9542fd, read since
    ("realworld39",): {"stage": 0.60, "category": 0.70, "digest": 1.0, "chosen": 0.95},  # blind at c5696bc (45 / 60 / 85), read since
    ("realworld40",): {"stage": 0.54, "category": 0.29, "digest": 1.0, "chosen": 0.75},  # blind at c67bdfd, not read
    # blind at 87b27c5 (33 / 58 / 100 / 67); 4125: the kernel's assertion before the device-side assert it
    # caused is the root now, read as the sampling's precision (fam_sampling), labelled the device's
    ("realworld41",): {"stage": 0.33, "category": 0.54, "digest": 1.0, "chosen": 0.66},
    ("realworld42",): {"stage": 0.50, "category": 0.80, "digest": 1.0, "chosen": 0.70},  # blind at fae29b4 (87b27c5's analyzer)
    ("realworld43",): {"stage": 0.60, "category": 0.40, "digest": 1.0, "chosen": 0.90},  # blind at 54eb939 (and 87b27c5: the same)
    ("realworld44",): {"stage": 0.71, "category": 0.71, "digest": 1.0, "chosen": 1.0},  # blind at 6763255: developers' notes
    ("realworld45",): {"stage": 0.83, "category": 0.83, "digest": 1.0, "chosen": 1.0},  # blind at 3e0250d: developers' notes
    ("realworld46",): {"stage": 0.57, "category": 0.64, "digest": 1.0, "chosen": 0.85},  # blind at 1d9a69a: issues and notes
    ("realworld47",): {"stage": 0.83, "category": 0.41, "digest": 1.0, "chosen": 0.83},  # blind at 924802f (83 / 33 / 92 / 75), misses read once
    ("realworld48",): {"stage": 0.59, "category": 0.72, "digest": 1.0, "chosen": 0.95},  # blind at 46f6009 (45 / 50 / 100 / 91), misses read once
    # category .84: 4912 (AgentFlow's code tool: `Error executing code: signal only works in main thread`, labelled
    # other) is read since 2026-12-07 as the family of verifiers' signal timeouts off the main thread (reward_parsing)
    ("realworld49",): {"stage": 0.57, "category": 0.84, "digest": 1.0, "chosen": 0.89},  # blind at 0e3be76 (58 / 79 / 100 / 84), misses read once
    ("realworld50",): {"stage": 0.45, "category": 0.50, "digest": 1.0, "chosen": 0.86},  # blind at 5a7bc0f (36 / 45 / 100 / 86), misses read once
    ("realworld51",): {"stage": 0.71, "category": 0.64, "digest": 1.0, "chosen": 0.71},  # blind at 1e1d508 (71 / 57 / 100 / 71), misses read once
    ("realworld52",): {"stage": 0.72, "category": 0.48, "digest": 1.0, "chosen": 0.89},  # blind at 3112729 (59 / 45 / 100 / 79), misses read once
    ("realworld53",): {"stage": 0.61, "category": 0.61, "digest": 1.0, "chosen": 0.77},  # blind at 3e25d1a (56 / 61 / 94 / 67), misses read once
    ("realworld54",): {"stage": 1.0, "category": 0.75, "digest": 1.0, "chosen": 0.75},  # blind at 31e5f91 (75 / 50 / 100 / 75), misses read once
    ("realworld55",): {"stage": 0.71, "category": 0.78, "digest": 1.0, "chosen": 0.78},  # blind at e4d61be (71 / 64 / 100 / 79), misses read once
    ("realworld56",): {"stage": 0.68, "category": 0.63, "digest": 1.0, "chosen": 0.90},  # blind at 98ef4fa (64 / 64 / 100 / 91), misses read once
    ("realworld57",): {"stage": 0.80, "category": 0.57, "digest": 1.0, "chosen": 1.0},  # blind at 9e0ff44 (76 / 38 / 100 / 95), misses read once
    ("realworld58",): {"stage": 0.62, "category": 0.62, "digest": 1.0, "chosen": 0.75},  # blind at a745eb3 (62 / 50 / 100 / 75), misses read once
    # 29 cases the search tool still found (3, 10, 9, 2, 1 and 4): blind (24 at 82713e9, 63 and 64's 5 after the
    # first two readings of 59 to 62 were written: 41 / 55 / 100 / 79), misses read once
    ("realworld59", "realworld60", "realworld61", "realworld62", "realworld63", "realworld64"):
        {"stage": 0.55, "category": 0.55, "digest": 1.0, "chosen": 0.79},
    # 26 cases from a pool the search tool had almost emptied (2, 2, 10, 5, 5 and 2): 65 to 69 blind at
    # 7c6df26 (62 / 62 / 100 / 92), misses read once; 70 blind at 3664685 (0 / 50 / 100 / 0), not read
    ("realworld65", "realworld66", "realworld67", "realworld68", "realworld69", "realworld70"):
        {"stage": 0.70, "category": 0.70, "digest": 1.0, "chosen": 0.85},
}


@pytest.fixture(scope="module")
def rows():
    return evaluate()


def test_every_corpus_case_is_analysed(rows):
    assert len(rows) >= (63 if SHARED else 0) + 220  # the shared corpora and the cases collected here
    for case, verdict, _ in rows:
        assert verdict["outcome"] in ("pass", "crash", "hang", "wrong_result", "running", "unknown"), case["file"]


@pytest.mark.parametrize("split,key", [(s, k) for s in FLOORS for k in FLOORS[s]])
def test_share_meets_floor(rows, split, key):
    mine = [r for r in rows if r[0]["corpus"] in split]
    if not mine:
        pytest.skip(f"no cases of {'+'.join(split)}: ../shared/corpus is not beside the repo")
    got = shares(mine)[key]
    misses = [c["id"] for c, _, s in mine if not s[key]]
    assert got >= FLOORS[split][key], f"{'+'.join(split)} {key}: {got:.0%} < {FLOORS[split][key]:.0%}; misses: {misses}"


# HELD_OUT: scored blind, not tuned on: their floors above hold them
# (713, a pass that ends with NPU compile errors at shutdown and no update in the excerpt, reads as a hang)
# Passes still read as failures, and why (the shares above count them):
NOT_READ = {1030: "a notebook's training table pasted as markdown (`1 | -0.2836 | … | nan`): no line of it reads "
                  "as a step, so the run reads as silent",
            1666: "two lines, a reward function's error message a maintainer calls benign in the thread, and "
                  "nothing after them: the log alone is a run gone silent",
            1807: "two lines, a debug rollout-only run aborting its leftover requests and reporting its rollout's "
                  "metrics, and nothing after them: nothing says the run ended, so it reads as silent"}


def test_passing_runs_have_no_root_cause(rows):
    for case, verdict, _ in rows:
        if case["outcome"] == "pass" and case["corpus"] not in HELD_OUT and case["id"] not in NOT_READ:
            assert verdict["root_cause"] is None, case["file"]
            if case["corpus"] in ("realworld", "realworld2"):
                assert verdict["outcome"] == "pass", case["file"]


def test_the_second_reader_labelled_corpus_cases_by_lines_of_their_logs():
    """tests/corpus/reader: each entry names a case of the corpus (once), with a stage, outcome and
    category of the labels' vocabularies and a line of that case's log."""
    from reader_agreement import readings

    read = readings()
    assert len(read) >= 132, len(read)
    known = {(c["corpus"], int(c["id"])): c for c in cases()}
    for key, r in read.items():
        if key[0] in ("realworld", "realworld2", "realworld3") and not SHARED:
            continue
        assert key in known, key
        assert r["failed_stage"] in (None, 1, 2, 3, 4, 5, 6, 7) and r["outcome"] in ("crash", "hang", "wrong_result", "pass")
        assert r["root_cause_line"] in known[key]["path"].read_text(errors="replace").splitlines(), key


def test_two_labels_name_the_same_line_as_the_analyzer_reads_it_or_a_cut_of_it():
    from reader_agreement import agree, same_line

    assert same_line("(WorkerDict pid=7) [rank3]: KeyError: 'prompt'", "KeyError: 'prompt'")  # prefixes peeled
    assert same_line("s watchdog got stuck for 480 seconds", "ProcessGroupNCCL's watchdog got stuck for 480 seconds")
    assert not same_line("KeyError: 'prompt'", "KeyError: 'answer'") and not same_line("", "KeyError")
    label = {"failed_stage": 5, "category": "reward_parsing", "outcome": "crash", "root_cause_line": "KeyError: 'x'"}
    other = label | {"failed_stage": None, "root_cause_line": "(TaskRunner pid=1) KeyError: 'x'"}
    assert agree(label, other) == {"stage": False, "category": True, "outcome": True, "chosen": True}
