"""The xDial-Eval CSVs (Zhang et al., 2023, "xDial-Eval"): English originals plus machine
translations into nine languages, one ``ratings`` column per file.

Turn-level files have ``<lang>_ctx`` (turns separated by newlines) and ``<lang>_res``;
dialogue-level files have ``<lang>_dial``. ``language=`` picks the text the samples carry;
the other languages stay available in ``meta["translations"]``.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

from robusteval.data.base import DatasetInfo, as_float, iter_csv, register_dataset, split_turns
from robusteval.errors import DataFormatError
from robusteval.types import HumanScale, Sample

LANGUAGES = ("english", "arabic", "chinese", "french", "german", "hindi", "japanese", "korean",
             "russian", "spanish")


def load_xdial_csv(path: Path, name: str, aspect: str, scale: HumanScale, level: str = "turn",
                   language: str = "english") -> list[Sample]:
    if language not in LANGUAGES:
        raise ValueError(f"language must be one of {', '.join(LANGUAGES)}, got {language!r}")
    cols = (f"{language}_dial",) if level == "dial" else (f"{language}_ctx", f"{language}_res")
    samples = []
    for i, (line, row) in enumerate(iter_csv(path, required=(*cols, "ratings"))):
        rating = as_float(row["ratings"], path, line, "ratings")
        translations: dict[str, dict[str, str]] = {}
        for lang in LANGUAGES:
            if level == "dial" and f"{lang}_dial" in row:
                translations[lang] = {"dialogue": row[f"{lang}_dial"]}
            elif f"{lang}_ctx" in row and f"{lang}_res" in row:
                translations[lang] = {"context": row[f"{lang}_ctx"], "response": row[f"{lang}_res"]}
        if level == "dial":
            turns = split_turns(row[cols[0]])
            if not turns:
                raise DataFormatError(path, "empty dialogue", line=line, field=cols[0])
            context, response = turns[:-1], turns[-1]
        else:
            context, response = split_turns(row[cols[0]]), row[cols[1]].strip()
        samples.append(Sample(
            id=f"{name}/{i}", task="dialogue", response=response, context=context,
            human={aspect: rating},
            meta={"dataset": name, "index": i, "language": language, "level": level,
                  "translations": translations, "scales": {aspect: scale.to_dict()}},
        ))
    return samples


_XDIAL = [
    ("dailydialog-zhao", "turn/dailydialog-zhao.csv", "overall", HumanScale(1, 5),
     "DailyDialog, Zhao et al. 2020 AMT appropriateness/overall (900)"),
    ("persona-zhao", "turn/persona-zhao.csv", "overall", HumanScale(1, 5),
     "PersonaChat, Zhao et al. 2020 AMT overall (900)"),
    ("persona-usr", "turn/persona-usr.csv", "maintains_context", HumanScale(1, 3),
     "USR PersonaChat 'Maintains Context' mean (300); use usr-personachat for other aspects"),
    ("fed-turn", "turn/fed-turn.csv", "overall", HumanScale(0, 4),
     "FED turn-level Overall mean (375)"),
    ("fed-dial", "dial/fed-dial.csv", "overall", HumanScale(0, 4),
     "FED dialogue-level Overall mean (125); response = last turn"),
    ("dailydialog-grade", "turn/dailydialog-grade.csv", "coherence", HumanScale(1, 5),
     "DailyDialog GRADE coherence (300)"),
    ("convai2-grade", "turn/convai2-grade.csv", "coherence", HumanScale(1, 5),
     "ConvAI2 GRADE coherence (600)"),
    ("empathetic-grade", "turn/empathetic-grade.csv", "coherence", HumanScale(1, 5),
     "EmpatheticDialogues GRADE coherence (300)"),
    ("dailydialog-gupta", "turn/dailydialog-gupta.csv", "overall", HumanScale(1, 5),
     "DailyDialog multi-reference, Gupta et al. 2019 (500)"),
    ("conture-turn", "turn/conture-turn.csv", "overall", HumanScale(0, 2),
     "ConTurE turn-level (1066)"),
    ("conture-dial", "dial/conture-dial.csv", "overall", HumanScale(1, 5),
     "ConTurE dialogue-level (119); response = last turn"),
]

for _name, _rel, _aspect, _scale, _desc in _XDIAL:
    _level = "dial" if _rel.startswith("dial/") else "turn"
    register_dataset(DatasetInfo(
        _name, f"xDial-Eval/data/{_rel}", "dialogue", _desc, {_aspect: _scale},
        "xDial-Eval (Zhang et al. 2023) CSV", level=_level,
        extra={"languages": list(LANGUAGES)},
    ))(partial(load_xdial_csv, name=_name, aspect=_aspect, scale=_scale, level=_level))
