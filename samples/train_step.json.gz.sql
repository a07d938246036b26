select name, value from stats where value > 0 and (severity in ('error', 'data_loss') or name like 'flow%');
