"""The template's Python files keep their Jinja to a budget.

Every ``{%`` tag in a ``.py`` template is a branch a maintainer reads in two languages at once.
A choice that changes a whole module is a file of its own (a file name with a condition); a
choice that a project may change later is plain config; only what neither fits stays a tag.
Raising the budget is a decision: say in the commit which tags are worth it and why.
"""

from pathlib import Path

TEMPLATE = Path(__file__).resolve().parents[1] / "template"
# Half the 683 tags of the first full text-LM template (342), then the image modality: the
# config sections and validation each modality brings, and the shared tests' branches where a
# batch or a head differs (tokens or images, `output` or `head`). Then timeseries (512 -> 552):
# the forecaster's position choices and its config section and rules. Offline and streaming
# are one config field (model.causal), not a render-time branch, which kept it to 42 tags.
# Then tabular (552 -> 580): its config section, [baseline] and rules, and the head's two
# tasks (classification, regression) where the shared tests look at outputs. Each modality's
# training-quality test lives in its own test file, not in a branch of test_train.
# Then SSL pretraining (580 -> 620): the [pretrain] section and its rules, the two commands,
# and the model fields of the objective. The image encoder's `keep` (an MAE encodes the
# visible patches alone) is plain code in every image project. Each pretrainer and its tests are files
# of their own, and what the trainer needs of an objective is a module (`pretraining.py`),
# not a branch in the trainer.
# Then deployment (620 -> 670): the [export] section, its rules and its command; export.py's
# two targets (a program and an AOTInductor package, or ONNX), and a language model's cached
# step, whose package is prefill and decode in one; the export tests' sequence-length checks.
# The runners under deploy/ are plain files, and each target's tests are a file of their own.
# Then speculative decoding (670 -> 680): the draft's two config fields and their rule, and the
# two entry points of generation (sampling and its bench) that run it; the decoding itself, its
# draft config and its tests are files of their own.
# Then distillation (680 -> 695): the [distill] section and its rule, the command, and the
# module's word on distilling a speculative project's draft; the loss itself is one function
# for every modality (KL on logits, squared error on numbers), not a branch per task.
# Then the server (695 -> 711): the [serve] section (a language model's limits are tokens, a
# predictor's a batching wait), its rule and the command, and the one place the completions
# pick the speculative engine. The engine, the batcher, the speculative engine, the routes
# and their tests are files of their own, and the per-row positions of a batched decode step
# are plain code in the caches, not a branch.
# Then tensor parallel and the mesh (707 -> 718): the [parallel] check of the layout's split
# dimensions, the one call that applies tensor parallel, and the `mesh` command of FSDP2
# projects. The plan, the dry run and their tests are files of their own; the mesh, its check
# and the loss-parallel context are plain code in every project, and a test's expected
# placements follow from the parameter names, not a branch per answer (the seq_len message
# became one expression on the way).
# Then pipeline parallel (718 -> 743): the [parallel] pipeline fields and their check, the one
# call that builds the pipeline, the trainer's step through the schedule and its validation
# (the last stage scores, the others wait for its sums), the first stage's activations in the
# memory estimate and the bubble in the profile's setup. The split, the stages, the schedule
# and their tests are files of their own; the fourth mesh dimension, the gradient norm over
# the stages and the agreement on non-finite parameters are plain code in every project.
BUDGET = 743


def test_python_templates_stay_within_their_jinja_budget():
    counts = {
        path.relative_to(TEMPLATE): path.read_text().count("{%")
        for path in TEMPLATE.rglob("*.py*")
        if path.is_file()
    }
    total = sum(counts.values())
    largest = sorted(counts.items(), key=lambda item: -item[1])[:5]
    assert total <= BUDGET, f"{total} tags over a budget of {BUDGET}; the largest: {largest}"
