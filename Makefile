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
ALL_CFLAGS := -std=gnu11 $(WARN) $(CFLAGS) $(PKG_CFLAGS) -Isrc -D_FILE_OFFSET_BITS=64 \
              -DDISKIMG_VERSION='"$(VERSION)"' -pthread -MMD -MP
LIBS    := $(PKG_LIBS) -lpthread -lm

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

LIB_SRC  := $(sort $(shell find src -name '*.c' ! -name main.c))
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o)
MAIN_OBJ := $(BUILD)/src/main.o
UNIT_SRC := $(sort $(wildcard tests/unit/test_*.c))
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)
TOOLS_SRC := $(sort $(wildcard tests/tools/*.c))
TOOLS_BIN := $(TOOLS_SRC:tests/tools/%.c=$(BUILD)/tools/%)
FUZZ_SRC  := $(sort $(wildcard tests/fuzz/fuzz_*.c))
FUZZ_BIN  := $(FUZZ_SRC:tests/fuzz/%.c=$(BUILD)/fuzz/%)
FUZZ_SECONDS ?= 60

.PHONY: all clean clean-demo demo check test unit deps deps-test install uninstall bench asan fuzz fuzz-targets

all: diskimg

$(BUILD)/diskimg: $(MAIN_OBJ) $(BUILD)/libdiskimg.a
	$(CC) $(LDFLAGS) -o $@ $^ $(LIBS)

diskimg: $(BUILD)/diskimg
ifeq ($(BUILD),build)
	cp $< $@
endif

$(BUILD)/libdiskimg.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c -o $@ $<

$(BUILD)/tests/%: tests/unit/%.c $(BUILD)/libdiskimg.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(LDFLAGS) -Itests/unit -o $@ $< $(BUILD)/libdiskimg.a $(LIBS)

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

# The whole suite, then again under AddressSanitizer+UBSan in build-asan/.
check: deps-test
	@$(MAKE) --no-print-directory -j$(NPROC) all unit
	@$(MAKE) --no-print-directory -j$(NPROC) BUILD=build-asan SANITIZE=1 OPT=-O1 $(BUILD_ASAN_TARGETS)
	@tests/run.sh

BUILD_ASAN_TARGETS = build-asan/diskimg unit
NPROC := $(shell nproc 2>/dev/null || echo 2)

# Each fuzz target for FUZZ_SECONDS (default 60) in build-fuzz/ (clang with
# libFuzzer: scripts/deps.sh fuzz); crashes are left in build-fuzz/findings/.
fuzz:
	@scripts/deps.sh fuzz
	@$(MAKE) --no-print-directory BUILD=build-fuzz CC=clang FUZZ=1 OPT=-O1 fuzz-targets
	@tests/fuzz/run.sh $(FUZZ_SECONDS)

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
	rm -rf build build-asan build-fuzz diskimg bench/zerobench bench/ioq_bench tests/out bench/out

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
