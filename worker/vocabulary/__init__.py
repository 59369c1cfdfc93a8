"""The vocabulary of a campaign's spec that the API, the workers and the SDK share: its inputs
and their mapping to the GP's features (:mod:`worker.vocabulary.space`, numpy only, which the SDK's
metamodel uses too), its pools and initial designs (:mod:`worker.vocabulary.design`,
:mod:`worker.vocabulary.pools`), and the defaults and names every layer reads
(:mod:`worker.vocabulary.defaults`). It imports nothing of the product beyond itself, and no
torch."""
