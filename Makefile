# The two commands of the README. Everything else is in scripts/.
.PHONY: run test setup models bundle

run:     ## install what is missing, then run the main job
	scripts/run.sh

test:    ## install what is missing, then run every test
	scripts/test.sh

setup:   ## only install what is missing (system packages, test models)
	scripts/setup.sh

models:  ## only fetch and verify the test models
	python3 scripts/fetch_models.py

bundle:  ## build the installable Linux package (.deb, release) into $CARGO_TARGET_DIR/release/bundle/deb/
	scripts/setup.sh
	npm ci --no-audit --no-fund --loglevel=error
	scripts/bundle.sh
