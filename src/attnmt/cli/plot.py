"""`attnmt plot`: draw the attention of sentences of a split, or redraw saved plot data.

    attnmt plot runs/reverse --sentences 0,5,12          # decode, save .npz, draw
    attnmt plot runs/reverse --sentences 3-7 --reference  # while reading the references
    attnmt plot --from runs/reverse/plots/test-5.npz      # redraw, no model needed

Each sentence gives `{split}-{index}.npz` (weights, labels, metadata: `attnmt.plotting.
save_arrays`) and its pictures, PNG and SVG: one heatmap for an RNN; for the Transformer
the grid of every layer and head (`{split}-{index}-layers`) and the alignment view (the
chosen layer and head, `--align-layer`/`--align-head`). Indices count from 0 in the split
as `attnmt data show` lists it. Pictures are drawn from the saved arrays only, so
`--from` redraws exactly what was decoded.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from matplotlib.figure import Figure

from attnmt.cli.options import (
    add_decoding_arguments,
    add_explain_arguments,
    check_decoding_arguments,
    explain_methods,
)
from attnmt.config import IMAGE_CORPORA
from attnmt.data.preparation import decoding_split
from attnmt.decoding.attention_choice import choose_attention, labels
from attnmt.decoding.attention_maps import draw_saved, write_attention
from attnmt.decoding.decode_ids import translate_ids
from attnmt.decoding.options import SearchOptions
from attnmt.decoding.runs import load_run
from attnmt.decoding.scoring import forced_weights
from attnmt.decoding.translator import source_limit
from attnmt.devices import pick_device
from attnmt.errors import DataError, UserError
from attnmt.evaluation.vision import glimpse_path, redraw_looks, split_canvases, write_looks
from attnmt.explain import check_method, explain, scale_of
from attnmt.explain.images import canvas_maps
from attnmt.plotting import load_arrays

FORMATS = ("png", "svg")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "run",
        nargs="?",
        metavar="RUN",
        help="a run directory or checkpoint directory (leave out with --from)",
    )
    parser.add_argument(
        "--sentences",
        default="0",
        metavar="LIST",
        help="0-based indices in the split: '0,5,12', ranges '3-7' (default 0)",
    )
    parser.add_argument(
        "--split",
        default="test",
        choices=("train", "dev", "test"),
        help="which split the indices count in (default test)",
    )
    parser.add_argument(
        "--reference",
        action="store_true",
        help="draw the attention while the model reads the reference translation (forced "
        "decoding) instead of writing its own",
    )
    parser.add_argument(
        "--from",
        dest="saved",
        nargs="+",
        metavar="FILE.npz",
        help="redraw plot data saved by `attnmt plot` or `attnmt translate --plot`",
    )
    parser.add_argument(
        "--out",
        metavar="DIR",
        help="where to write (default RUN/plots; with --from, beside each .npz file)",
    )
    parser.add_argument(
        "--formats",
        default=",".join(FORMATS),
        metavar="LIST",
        help="picture formats matplotlib knows, comma-separated (default png,svg)",
    )
    add_decoding_arguments(parser)
    add_explain_arguments(parser)


def run(args: argparse.Namespace) -> int:
    if args.align_offset is not None:
        raise UserError(
            "--align-offset chooses which step's weights become links (translate, evaluate); "
            "a plot shows the weights of every step as the decoder used them, so leave it out"
        )
    formats = [f.strip().lower() for f in args.formats.split(",") if f.strip()]
    known = Figure().canvas.get_supported_filetypes()
    unknown = [f for f in formats if f not in known]
    if not formats or unknown:
        raise UserError(
            f"--formats {args.formats!r}: {', '.join(unknown) or 'empty'} is not a picture "
            f"format; choose among {', '.join(sorted(known))}"
        )
    if args.saved:
        if args.run:
            raise UserError("give either RUN (to decode) or --from FILE.npz (to redraw), not both")
        files = redraw(args.saved, args, formats)
    elif args.run:
        files = draw_split(args, formats)
    else:
        raise UserError("give a RUN directory to decode, or --from FILE.npz to redraw")
    for path in files:
        print(path)
    return 0


def parse_indices(text: str) -> list[int]:
    """'0,5,12' or '3-7' (inclusive) or both mixed -> sorted distinct indices."""
    indices: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        lo, sep, hi = part.partition("-")
        if not (lo.isdigit() and (not sep or hi.isdigit())):
            raise UserError(
                f"--sentences: {part!r} is not an index or a range; write e.g. 0,5,12 or 3-7"
            )
        first, last = int(lo), int(hi) if sep else int(lo)
        if last < first:
            raise UserError(f"--sentences: the range {part!r} runs backwards; write {hi}-{lo}")
        indices.update(range(first, last + 1))
    return sorted(indices)


def draw_split(args: argparse.Namespace, formats: list[str]) -> list[Path]:
    """Decode the chosen sentences of a split with their weights; save and draw each."""
    check_decoding_arguments(args)
    indices = parse_indices(args.sentences)
    method = (explain_methods(args.explain) or [None])[0]
    loaded = load_run(args.run, device=pick_device(args.device, option="--device"))
    choice = choose_attention(loaded.cfg.model, layer=args.align_layer, head=args.align_head)
    if method is not None:
        check_method(method, loaded.model, choice)
    elif not loaded.model.uses_attention:
        raise UserError(
            f"this run's model ({loaded.cfg.model.name}) has no attention; nothing to draw "
            "but an explanation (--explain occlusion, grad-input, integrated-gradients)"
        )
    examples = decoding_split(loaded.cfg.data, args.split, loaded.vocab)
    outside = [i for i in indices if i >= len(examples)]
    if outside:
        raise UserError(
            f"--sentences {outside[0]} is past the end: the {args.split} split has "
            f"{len(examples)} sentences, numbered 0 to {len(examples) - 1}"
        )
    vocab = loaded.vocab
    limit = source_limit(loaded.cfg.model, args.max_source_len)
    chosen = [examples[i] for i in indices]
    sources = [vocab.src.encode(ex.src)[:limit] for ex in chosen]
    if args.reference:
        targets = [vocab.tgt.encode(ex.tgt) for ex in chosen]
        weights = forced_weights(
            loaded.model, list(zip(sources, targets, strict=True)), batch_tokens=args.batch_tokens
        )
        outputs = [ex.tgt for ex in chosen]
    else:
        translations = translate_ids(
            loaded.model,
            sources,
            vocab.tgt.decode,
            SearchOptions(
                beam=args.beam,
                alpha=args.alpha,
                max_len_ratio=args.max_len_ratio,
                need_weights=method is None,
            ),
            batch_tokens=args.batch_tokens,
        )
        targets = [t.tokens for t in translations]
        weights = [t.weights for t in translations]
        outputs = [t.text for t in translations]
    images = loaded.cfg.data.corpus in IMAGE_CORPORA
    if method is not None:  # the method's matrix in place of the attention
        height = int(loaded.cfg.model.image_height) if images else None
        pairs = list(zip(sources, targets, strict=True))
        weights = [
            e.matrix
            for e in explain(
                loaded.model, pairs, method, choice, ig_steps=args.ig_steps, image_height=height
            )
        ]
    out_dir = Path(args.out) if args.out else loaded.run_dir / "plots"
    if images:
        return _draw_images(
            args, loaded, indices, chosen, sources, targets, weights, out_dir, formats
        )
    files: list[Path] = []
    for index, ex, src_ids, tgt_ids, w, output in zip(
        indices, chosen, sources, targets, weights, outputs, strict=True
    ):
        files += write_attention(
            out_dir / f"{args.split}-{index}",
            w,
            labels(vocab.src, src_ids),
            labels(vocab.tgt, tgt_ids),
            choice,
            formats=formats,
            **({"explain": method} if method else {}),
            scale=scale_of(method),
            source=ex.src,
            translation=output,
            reference=ex.tgt,
            forced=args.reference,
            id=ex.id,
            model=loaded.cfg.model.name,
            run=str(loaded.run_dir),
        )
    return files


def _draw_images(args, loaded, indices, chosen, sources, targets, weights, out_dir, formats):
    """Image tasks: one panel per emitted digit, its attention over the image (and the
    glimpse path of the glimpse model), the true digit boxes framed."""
    canvases = split_canvases(loaded.cfg.data, args.split)
    files: list[Path] = []
    rows = zip(indices, chosen, sources, targets, weights, strict=True)
    for index, ex, src_ids, tgt_ids, w in rows:
        path = None
        if hasattr(loaded.model, "glimpse_path"):
            path = glimpse_path(loaded.model, src_ids)
        height, width = canvases[index].pixels.shape
        files += write_looks(
            out_dir / f"{args.split}-{index}",
            w.numpy()
            if args.explain is None
            else canvas_maps(w.numpy(), height, width).reshape(w.shape[0], -1),
            ex.src,
            labels(loaded.vocab.tgt, tgt_ids),
            boxes=canvases[index].boxes,
            path=path,
            formats=formats,
            id=ex.id,
            model=loaded.cfg.model.name,
            run=str(loaded.run_dir),
            forced=args.reference,
            **({"explain": args.explain} if args.explain else {}),
        )
    return files


def redraw(paths: list[str], args: argparse.Namespace, formats: list[str]) -> list[Path]:
    """Draw saved plot data again, with no model: the same pictures, or another view."""
    files: list[Path] = []
    for name in paths:
        path = Path(name)
        try:
            data = load_arrays(path)
        except FileNotFoundError:
            raise DataError(f"{path}: file not found; give a .npz written by attnmt") from None
        except (OSError, ValueError, KeyError):
            raise DataError(
                f"{path} is not plot data written by attnmt (a .npz with weights, labels and "
                "metadata); give a file from `attnmt plot` or `attnmt translate --plot`"
            ) from None
        stem = (Path(args.out) / path.stem) if args.out else path.with_suffix("")
        if "image" in data.meta:
            files += redraw_looks(data, stem, formats=formats)
            continue
        files += draw_saved(
            data, stem, layer=args.align_layer, head=args.align_head, formats=formats
        )
    return files
