#!/usr/bin/env node
import { launch } from './launch.js'

await launch('brine-syndic')
