# diskimg — plain Makefile.  `make` builds ./diskimg; see README for the rest.
PREFIX  ?= /usr/local
DESTDIR ?=
BINDIR  ?= $(PREFIX)/bin
MANDIR  ?= $(PREFIX)/share/man

CC      ?= cc
BUILD   ?= build
VERSION := 0.1.0

PKGS    := zlib libzstd liburing
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null || echo -lz -lzstd -luring)

OPT     ?= -O2
CFLAGS  ?= $(OPT) -g
WARN    := -Wall -Wextra -Wformat=2 -Wno-format-nonliteral -Wmissing-prototypes \
           -Wstrict-prototypes -Wshadow -Wvla
# WERROR=1 (CI): warnings are errors
ifeq ($(WERROR),1)
WARN    += -Werror
endif
ALL_CFLAGS := -std=gnu11 $(WARN) $(CFLAGS) $(PKG_CFLAGS) -Isrc -D_FILE_OFFSET_BITS=64 \
              -DDISKIMG_VERSION='"$(VERSION)"' -pthread -MMD -MP
LIBS    := $(PKG_LIBS) -lpthread -lm

# SANITIZE=1 and FUZZ=1 builds use clang unless CC is given: make check runs
# the plain build with gcc and the sanitized one with clang, so the suite
# sees both compilers' code.
ifneq ($(filter 1,$(SANITIZE) $(FUZZ)),)
ifeq ($(origin CC),default)
CC      := clang
endif
endif

# Hardening, on by default (HARDEN=0 turns it off): stack protector, PIE,
# full RELRO (read-only GOT, symbols bound at start-up).  _FORTIFY_SOURCE
# checks buffer sizes in libc calls; it needs optimisation (glibc warns
# without), and is left out of sanitizer and fuzz builds, whose
# interceptors check the same calls more precisely.  Level 3 where the
# compiler and glibc support it (gcc 12, clang 14 with glibc 2.34+), else
# what glibc makes of it (2).  tests/build-hardening.sh checks the result.
HARDEN  ?= 1
ifeq ($(HARDEN),1)
ALL_CFLAGS += -fstack-protector-strong -fPIE
LDFLAGS    += -pie -Wl,-z,relro,-z,now
ifeq ($(filter 1,$(SANITIZE) $(FUZZ)),)
ifneq ($(filter-out -O0,$(filter -O%,$(CFLAGS))),)
FORTIFY_LEVEL = $(shell printf '\043include <stdio.h>\n__USE_FORTIFY_LEVEL\n' | \
    $(CC) $(CFLAGS) -U_FORTIFY_SOURCE -D_FORTIFY_SOURCE=3 -E - 2>/dev/null | tail -n 1)
ALL_CFLAGS += $(if $(filter 2 3,$(FORTIFY_LEVEL)),-U_FORTIFY_SOURCE -D_FORTIFY_SOURCE=$(FORTIFY_LEVEL))
endif
endif
endif

# FUZZ=1 (make fuzz): clang, libFuzzer instrumentation + ASan/UBSan everywhere.
ifeq ($(FUZZ),1)
ALL_CFLAGS += -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all \
              -fno-omit-frame-pointer
LDFLAGS    += -fsanitize=address,undefined
endif

ifeq ($(SANITIZE),1)
ALL_CFLAGS += -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
LDFLAGS    += -fsanitize=address,undefined
endif

# The library's source folders, named: a .c file elsewhere is not compiled
# just because it exists.  libdiskimg.a (never prints, exits or installs
# signal handlers) is these; the program is src/cli/.
SRC_DIRS := src src/formats src/formats/qcow2 src/formats/vmdk src/formats/ova \
            src/formats/vhd src/formats/vhdx src/formats/vdi src/formats/raw src/codec src/io src/util src/zerodetect
LIB_SRC  := $(sort $(foreach d,$(SRC_DIRS),$(wildcard $(d)/*.c)))
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o)
CLI_SRC  := $(sort $(wildcard src/cli/*.c))
CLI_OBJ  := $(CLI_SRC:%.c=$(BUILD)/%.o)
UNIT_SRC := $(sort $(wildcard tests/unit/test_*.c))
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)
TOOLS_SRC := $(sort $(wildcard tests/tools/*.c))
TOOLS_BIN := $(TOOLS_SRC:tests/tools/%.c=$(BUILD)/tools/%)
FUZZ_SRC  := $(sort $(wildcard tests/fuzz/fuzz_*.c))
FUZZ_BIN  := $(FUZZ_SRC:tests/fuzz/%.c=$(BUILD)/fuzz/%)
FUZZ_SECONDS ?= 60

.PHONY: FORCE all clean clean-demo demo check compile-check fuzz-smoke test unit deps deps-test install uninstall bench asan fuzz fuzz-targets

all: diskimg

$(BUILD)/diskimg: $(CLI_OBJ) $(BUILD)/libdiskimg.a
	$(CC) $(LDFLAGS) -o $@ $^ $(LIBS)

diskimg: $(BUILD)/diskimg
ifeq ($(BUILD),build)
	cp $< $@
endif

$(BUILD)/libdiskimg.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

# The compiler and flags a build directory was made with: objects are
# rebuilt when they change (CC=clang, SANITIZE=1, WERROR=1 ... in the same
# directory), not mixed with objects of another compiler.
$(BUILD)/.flags: FORCE
	$(shell mkdir -p $(@D))$(file >$@.new,$(CC) $(ALL_CFLAGS) $(LDFLAGS))
	@cmp -s $@.new $@ && rm -f $@.new || mv -f $@.new $@

FORCE:

$(BUILD)/%.o: %.c $(BUILD)/.flags
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c -o $@ $<

$(BUILD)/tests/%: tests/unit/%.c $(BUILD)/libdiskimg.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(LDFLAGS) -Itests/unit -o $@ $< $(BUILD)/libdiskimg.a $(LIBS)

# test_oom makes the library's allocations fail in turn: its calls to these
# go to the test's __wrap_ functions
$(BUILD)/tests/test_oom: LDFLAGS += -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=strdup

$(BUILD)/tools/%: tests/tools/%.c $(BUILD)/libdiskimg.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/libdiskimg.a $(LIBS)

# Fuzz targets: libFuzzer binaries with FUZZ=1, otherwise plain programs
# that run the target on the files they are given (regression replay).
ifeq ($(FUZZ),1)
$(BUILD)/fuzz/%: tests/fuzz/%.c tests/fuzz/walk.c $(BUILD)/libdiskimg.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(LDFLAGS) -fsanitize=fuzzer -Itests/fuzz -o $@ $< tests/fuzz/walk.c $(BUILD)/libdiskimg.a $(LIBS)
else
$(BUILD)/fuzz/%: tests/fuzz/%.c tests/fuzz/walk.c tests/fuzz/standalone_main.c $(BUILD)/libdiskimg.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(LDFLAGS) -DFUZZ_STANDALONE -Itests/fuzz -o $@ $< tests/fuzz/walk.c tests/fuzz/standalone_main.c $(BUILD)/libdiskimg.a $(LIBS)
endif

unit: $(UNIT_BIN) $(TOOLS_BIN) $(FUZZ_BIN)

# Installs missing Debian packages when run as root, prints the apt-get line otherwise.
deps:
	@scripts/deps.sh build
deps-test:
	@scripts/deps.sh test

demo: deps
	@$(MAKE) --no-print-directory all $(BUILD)/tools/genimg
	@scripts/demo.sh

clean-demo:
	rm -rf testdata/demo.raw testdata/demo-out

# The whole suite (tests/run.sh) against the plain build (gcc unless CC is
# given, hardened) and again against the AddressSanitizer+UBSan build in
# build-asan/ (clang), after a compile-only pass of the other compiler over
# every source with the plain flags (its warnings; -Werror with WERROR=1).
# The fuzz targets are built too (libFuzzer, build-fuzz/): the suite's
# tests/fuzz-smoke.sh runs each for FUZZ_SMOKE_SECONDS.
check: deps-test
	@$(MAKE) --no-print-directory -j$(NPROC) all unit
	@$(MAKE) --no-print-directory -j$(NPROC) BUILD=build-asan SANITIZE=1 OPT=-O1 $(BUILD_ASAN_TARGETS)
	@$(MAKE) --no-print-directory -j$(NPROC) BUILD=build-$(OTHER_CC) CC=$(OTHER_CC) compile-check
	@$(MAKE) --no-print-directory -j$(NPROC) $(FUZZ_BUILD) fuzz-targets
	@tests/run.sh

BUILD_ASAN_TARGETS = build-asan/diskimg unit
NPROC := $(shell nproc 2>/dev/null || echo 2)
# the compiler the plain build does not use
OTHER_CC = $(if $(findstring clang,$(shell $(CC) --version 2>/dev/null | head -n 1)),gcc,clang)

# Every source through $(CC) -fsyntax-only: warnings without code generation.
SYNTAX_SRC := $(LIB_SRC) $(CLI_SRC) $(UNIT_SRC) $(TOOLS_SRC) $(FUZZ_SRC) \
              tests/fuzz/walk.c tests/fuzz/standalone_main.c
compile-check: $(SYNTAX_SRC:%.c=$(BUILD)/syntax/%.ok)

$(BUILD)/syntax/%.ok: %.c $(BUILD)/.flags
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -Itests/unit -Itests/fuzz -DFUZZ_STANDALONE -fsyntax-only \
		-MF $(@:.ok=.d) -MT $@ $<
	@touch $@

# Each fuzz target for FUZZ_SECONDS (default 60) in build-fuzz/ (clang with
# libFuzzer: scripts/deps.sh fuzz); crashes are left in build-fuzz/findings/.
FUZZ_BUILD = BUILD=build-fuzz CC=clang FUZZ=1 OPT=-O1
fuzz:
	@scripts/deps.sh fuzz
	@$(MAKE) --no-print-directory -j$(NPROC) $(FUZZ_BUILD) fuzz-targets
	@tests/fuzz/run.sh $(FUZZ_SECONDS)

# Each fuzz target for FUZZ_SMOKE_SECONDS (default 15) on its seeds and the
# regression inputs only (tests/fuzz/README.md); exit 1 on any finding.
# make check runs the same as the test tests/fuzz-smoke.sh.
FUZZ_SMOKE_SECONDS ?= 15
fuzz-smoke:
	@scripts/deps.sh fuzz
	@$(MAKE) --no-print-directory -j$(NPROC) all build/tools/genimg
	@$(MAKE) --no-print-directory -j$(NPROC) $(FUZZ_BUILD) fuzz-targets
	@tests/fuzz/run.sh --smoke $(FUZZ_SMOKE_SECONDS)

fuzz-targets: $(FUZZ_BIN)

# The suite against the default build only.
test: all unit
	@DISKIMG_NO_ASAN=1 tests/run.sh

bench: deps-test all
	@$(MAKE) --no-print-directory bench/zerobench
	@bench/run.sh

bench/zerobench: bench/zerobench.c $(BUILD)/libdiskimg.a
	$(CC) $(ALL_CFLAGS) -o $@ $< $(BUILD)/libdiskimg.a $(LIBS)

bench/ioq_bench: bench/ioq_bench.c $(BUILD)/libdiskimg.a
	$(CC) $(ALL_CFLAGS) -o $@ $< $(BUILD)/libdiskimg.a $(LIBS)

install: all
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1
	install -m 755 diskimg $(DESTDIR)$(BINDIR)/diskimg
	install -m 644 man/diskimg.1 $(DESTDIR)$(MANDIR)/man1/diskimg.1
	install -D -m 644 scripts/diskimg-completion.bash \
		$(DESTDIR)$(PREFIX)/share/bash-completion/completions/diskimg

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/diskimg $(DESTDIR)$(MANDIR)/man1/diskimg.1 \
		$(DESTDIR)$(PREFIX)/share/bash-completion/completions/diskimg

clean:
	rm -rf build build-asan build-fuzz build-gcc build-clang diskimg bench/zerobench bench/ioq_bench tests/out bench/out

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
