# dlconform._nanobind (probes/nanobind/module.cpp), the glue that puts nanobind's nb::ndarray under
# test; included from the top Makefile. Built by `make build` only where Debian's nanobind-dev
# is installed (the sid tier): nanobind's own sources (nb_combined.cpp) are compiled with the
# glue, as nanobind's CMake rules do, with no network and no pip.
NANOBIND_DIR ?= /usr/share/nanobind
CXX ?= g++
NANOBIND_SO = $(PKG)/_nanobind$(EXT_SUFFIX)
NANOBIND_INC = -I$(NANOBIND_DIR)/include $(PY_INCLUDES)
NANOBIND_FLAGS := -std=c++17 -O2 -g -fPIC -fvisibility=hidden -DNDEBUG
NB_BUILD := $(BUILD)/nanobind

ifneq ($(wildcard $(NANOBIND_DIR)/include/nanobind/nanobind.h),)
build: $(NANOBIND_SO)
endif

# nanobind's library: its code, so its warnings are not ours to fail on
$(NB_BUILD)/nb_combined.o: $(NANOBIND_DIR)/src/nb_combined.cpp
	@mkdir -p $(NB_BUILD)
	$(CXX) $(NANOBIND_FLAGS) $(NANOBIND_INC) -c -o $@ $<
$(NB_BUILD)/module.o: probes/nanobind/module.cpp
	@mkdir -p $(NB_BUILD)
	$(CXX) $(NANOBIND_FLAGS) -Wall -Wextra -Werror $(NANOBIND_INC) -c -o $@ $<
$(NANOBIND_SO): $(NB_BUILD)/module.o $(NB_BUILD)/nb_combined.o
	$(CXX) -shared -o $@ $^
