"""The verifier's red team: a corpus of published exploit classes, each an attack on an honest module,
replayed (with mutations) against any problem's honest translation, and a model playing the attacker
on top (`akg redteam`). An attack the verifier accepts is saved as a failing test."""
