"""The kinds of sweep, one folder each, named by its key (`gptlab/kinds/ladder/`): a kind's section, stages and report."""
