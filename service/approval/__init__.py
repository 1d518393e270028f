"""The approval workflow: its states and rules (workflow), their application to the stored submissions (store),
verdicts after waivers, the JSON representations of submissions, and the records it issues: final records, DRAFT
PDFs, purchase orders and as-built addenda."""
