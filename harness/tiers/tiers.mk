# Debian tiers (included from the top Makefile).
#   make tier TIER=bookworm|trixie|sid [TIER_DIR=...]   build the tier, or reuse a complete one
#   make tier-conformance TIER=sid [TARGETS=...] [CLAUSE=...] [OUT=...]
#                                    run the suite inside the tier; reports in $(OUT)/$(TIER)/
#   make tier-bench TIER=sid [TARGETS=...] [REPEATS=...]   the benchmark inside; $(OUT)/$(TIER)/
#   make tier-fuzz-ci TIER=sid TARGET=numpy [FUZZ_SECONDS=...] [FUZZ_MIN_SECONDS=...]
#                                    fuzz-ci inside (fuzz toolchain layer added when missing);
#                                    outputs in $(OUT)/$(TIER)/fuzz/ (fuzz/README.md)
#   make tier-clean TIER=...         unmount and delete the tier
# `make conformance TIER=...` dispatches to tier-conformance (see the top Makefile), and
# `make fuzz-ci TIER=...` to tier-fuzz-ci (fuzz/fuzz.mk).
# Single-quotes a value for the shell (OUT, TARGETS and the like may hold spaces).
q = '$(subst ','\'',$(1))'
TIER ?=
TIER_DIR ?= $(HOME)/.cache/dlconform/tiers
TIER_SH := $(patsubst %/,%,$(dir $(lastword $(MAKEFILE_LIST))))/tier.sh
OUT ?= reports/out
TIER_ENV = TIER_DIR=$(call q,$(TIER_DIR)) OUT=$(call q,$(OUT)) \
  TARGETS=$(call q,$(TARGETS)) CLAUSE=$(call q,$(CLAUSE))

.PHONY: tier tier-conformance tier-bench tier-fuzz-ci tier-clean
tier:
	@$(TIER_ENV) sh $(TIER_SH) build $(call q,$(TIER))
tier-conformance:
	@$(TIER_ENV) sh $(TIER_SH) conformance $(call q,$(TIER))
tier-bench:
	@$(TIER_ENV) REPEATS=$(call q,$(REPEATS)) sh $(TIER_SH) bench $(call q,$(TIER))
tier-fuzz-ci:
	@$(TIER_ENV) TARGET=$(call q,$(TARGET)) FUZZ_SECONDS=$(call q,$(FUZZ_SECONDS)) \
	  FUZZ_MIN_SECONDS=$(call q,$(FUZZ_MIN_SECONDS)) FUZZ_CI_ARGS=$(call q,$(FUZZ_CI_ARGS)) \
	  sh $(TIER_SH) fuzz-ci $(call q,$(TIER))
tier-clean:
	@$(TIER_ENV) sh $(TIER_SH) clean $(call q,$(TIER))
