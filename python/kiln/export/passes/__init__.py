"""Graph passes run on each method's FX graph between torch.export and lowering.

One module per pass, named verb_object, each with a docstring saying why it
exists and a `run(ctx: PassContext)` function. `default_passes()` is the
pipeline the exporter uses, `run_passes()` (pipeline.py) the stage that runs
it on every method; PassManager (manager.py) names the pass that failed.
"""

from __future__ import annotations


def default_passes(optimize: bool = True, user_passes=()):
    """The exporter's pass pipeline, in order (imports torch). `optimize`
    adds the fusion passes (export(..., optimize=False) leaves them out).
    `user_passes` (export(..., passes=[...]), see user_pass) run after
    kiln's canonicalization, before its fusions, dtype casts, constant folding
    and dead-code elimination: they see operators in the form kiln runs them,
    and what they leave is cast, folded and cleaned up like the rest."""
    from . import (
        canonicalize_operators,
        check_shape_bounds,
        eliminate_dead_code,
        fold_batch_norms,
        fold_constants,
        fold_kv_head_expansion,
        fuse_attention,
        fuse_cache_attention,
        fuse_epilogues,
        insert_dtype_casts,
        lower_split_ops,
        match_state_updates,
        remove_noop_ops,
        simplify_view_chains,
        tensorize_symbolic_scalars,
    )
    from .manager import load_pass, user_pass

    fusion = (fold_batch_norms, fuse_epilogues) if optimize else ()
    attention = (fuse_attention,) if optimize else ()
    cache_attention = (fuse_cache_attention,) if optimize else ()
    canonical = [load_pass(m) for m in (
        check_shape_bounds,
        tensorize_symbolic_scalars,
        canonicalize_operators,
        match_state_updates,
        lower_split_ops,
        remove_noop_ops,
        simplify_view_chains,
        remove_noop_ops,        # chains that collapsed to the identity
    )]
    # What user passes leave unused is removed at once, before the fusions count users.
    users = [user_pass(p) for p in user_passes] + ([load_pass(eliminate_dead_code)] if user_passes else [])
    return canonical + users + [load_pass(m) for m in (
        *attention,             # before fold_kv_head_expansion, which folds into what it makes
        fold_kv_head_expansion,
        insert_dtype_casts,
        fold_constants,
        remove_noop_ops,        # casts of constants that folding made trivial
        *fusion,                # on constants and operators in their final form
        eliminate_dead_code,
        *cache_attention,       # on the unrepeated kv heads, counting live users only
    )]
