"""``robusteval salient train``'s config."""

from dataclasses import dataclass

from robusteval.config.common import Output


@dataclass(kw_only=True)
class SalientTrainConfig(Output):
    """Train the salient-word tagger of the broken-sentence attack on SummEval.

    Args:
        dataset: the (source, references) data: SummEval or any dataset with references
        train_docs: documents used for training; the rest validate
        epochs: training epochs
        seed: training seed
        data_dir: the human-judgment data folder (default $ROBUSTEVAL_DATA)
        accelerator: Lightning accelerator (auto: a GPU when there is one)
    """

    dataset: str = "summeval"
    train_docs: int = 80
    epochs: int = 3
    seed: int = 0
    data_dir: str | None = None
    accelerator: str = "auto"

    def validate(self) -> None:
        self.validate_out()
