"""One router per resource: health, campaigns, labeling (the loop), models (model-based answers)."""
