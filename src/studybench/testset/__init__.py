"""Test-set construction and corpus hygiene (DESIGN.md ``build/``): the book layout, MinerU parsing,
OCR clean-up, redaction of test items from the corpus and the residue audit (paper 2.1, 2.3, appendix H)."""
