# gadfly red team: a GNUmakefile shadows the protected Makefile (THREATS
# row 1). GNU make reads GNUmakefile before Makefile; this one builds what
# the Makefile builds, then puts a wrapper in the place of the program the
# run command starts: the real harness runs, then its results are replaced.
.DEFAULT_GOAL := rt_forged
include Makefile
rt_forged: all
	@mv -f @@RUN_PROGRAM@@ @@RUN_PROGRAM@@.rt-real
	@cp rt_wrap.sh @@RUN_PROGRAM@@
	@chmod +x @@RUN_PROGRAM@@
