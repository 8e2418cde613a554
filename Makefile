# The two commands of the README. Everything else is in scripts/.
.PHONY: run test setup models

run:     ## install what is missing, then run the main job
	scripts/run.sh

test:    ## install what is missing, then run every test
	scripts/test.sh

setup:   ## only install what is missing (system packages, test models)
	scripts/setup.sh

models:  ## only fetch and verify the test models
	python3 scripts/fetch_models.py
